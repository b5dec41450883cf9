"""One module per revision of the store's schema, oldest first by ``down_revision``."""
