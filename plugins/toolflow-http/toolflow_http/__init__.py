"""toolflow-http: an ``http`` implementation kind for toolflow.

A tool whose spec has an ``http:`` key is an HTTP request made with httpx,
templated from the call's arguments; the response becomes the result. The
plugin module is :mod:`toolflow_http.plugin`; the request logic (and the
escaping rules) is in :mod:`toolflow_http._request`.
"""

__version__ = "0.1.0"
