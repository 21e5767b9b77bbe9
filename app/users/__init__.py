"""Users: accounts (members, operators, admins), the product's recipients, roles, search."""
