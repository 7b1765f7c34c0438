from django.urls import path

app_name = "regressions"
urlpatterns = []
