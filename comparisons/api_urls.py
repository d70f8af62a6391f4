
urlpatterns: list = []  # comparison API (issue 4)
