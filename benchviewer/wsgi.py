"""The WSGI application that gunicorn serves (`benchviewer serve`)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchviewer.settings")
application = get_wsgi_application()
