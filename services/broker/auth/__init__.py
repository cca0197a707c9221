"""ACL 2.0 on the broker: the user/ACL store (config/users.json, config/acls.json) and the
AUTH_* admin processors (request codes 3001-3010)."""
