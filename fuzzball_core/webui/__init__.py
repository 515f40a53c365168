"""The Web UI: server-rendered pages Orchestrate serves at ``/`` of its REST listener.

Pages are Jinja2 templates rendered here (``templates/``) with htmx (vendored in ``static/``,
no CDN) for the parts that refresh in place. Visitors sign in with their email and password
(:mod:`.signin`); the session is an API token of their personal account kept in an HttpOnly,
SameSite=Strict cookie, and every state-changing form carries the session's CSRF token
(:mod:`.session`). Every page is served with a Content-Security-Policy that allows scripts
from this origin's files only (no inline script). The README's "Web UI" section describes
the pages; ``tests/webui/`` drives them in headless Chromium.
"""
