"""An Alembic environment as a project with N PostgreSQL shards writes it (env.py, one
revision), used by tests/sqlalchemy/test_alembic_shards.py."""
