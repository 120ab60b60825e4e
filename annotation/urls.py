from django.urls import path

from annotation import views

app_name = "annotation"
urlpatterns = [
    path("demonstrations/", views.next_question, name="next_question"),
    path("tasks/", views.next_task, name="next_task"),
]
