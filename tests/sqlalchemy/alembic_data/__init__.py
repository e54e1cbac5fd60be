"""An Alembic environment whose one revision is a data migration
(tests/sqlalchemy/test_alembic_data.py)."""
