"""What every app's REST API shares: the viewset and serializer bases, permissions,
pagination, the filter backend, the router, and the cross-cutting endpoints (token,
OpenAPI schema and its docs). Each domain app has its own ``api/`` package on top of
these; ``twin/urls.py`` puts them together under one ``api`` namespace.
"""
