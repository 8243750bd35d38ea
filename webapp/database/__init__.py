"""The PostgreSQL backend the product's Django settings name (``ENGINE``)."""
