
urlpatterns: list = []  # comparison pages (issue 4)
