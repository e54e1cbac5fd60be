"""What a database is, for a shard move's state file: which server, which database.

A move's state (its cursors, the time its copy began) is only true of the two databases
it was taken on. The same aliases can name other databases another day (a staging copy,
a rebuilt server), so the state records who they were and a later run compares:

- PostgreSQL: the cluster's system identifier, the database's name and oid, and the oid
  of the moved table named first (a table dropped and created again gets another);
- MySQL/MariaDB (MariaDB has no ``@@server_uuid``): host, port and data directory, the
  schema, and the creation time of the moved table named first;
- SQLite: the file's resolved path, with its device and inode (``moves`` adds them).
  A file deleted and made again at the same path may get the same inode number back
  from the file system: delete a move's state file with the databases it was taken on.
"""

from __future__ import annotations

from .fences import quote

__all__ = ["identity_query"]


def _literal(text: str, vendor: str) -> str:
    if vendor == "mysql":
        text = text.replace("\\", "\\\\")
    return "'" + text.replace("'", "''") + "'"


def identity_query(vendor: str, table: str) -> str:
    """A query of one row of text values that identify the connection's database;
    ``table`` (unquoted) is a table of the move. SQLite's row is the main file's path."""
    if vendor == "postgresql":
        regclass = _literal(quote(vendor, table), vendor)
        return (
            "SELECT (SELECT system_identifier::text FROM pg_control_system()), "
            "current_database(), "
            "(SELECT oid::text FROM pg_database WHERE datname = current_database()), "
            f"(SELECT oid::text FROM pg_class WHERE oid = to_regclass({regclass}))"
        )
    if vendor == "mysql":
        return (
            "SELECT CONCAT(@@hostname, ':', @@port, ':', @@datadir), DATABASE(), "
            "(SELECT CAST(CREATE_TIME AS CHAR) FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {_literal(table, vendor)})"
        )
    if vendor == "sqlite":
        return "SELECT file FROM pragma_database_list WHERE name = 'main'"
    raise ValueError(f"no identity query for {vendor}")
