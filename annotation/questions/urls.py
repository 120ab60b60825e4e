from django.urls import path

from annotation.questions import views

app_name = "questions"
urlpatterns = [
    path("", views.question_list, name="list"),
    path("<int:pk>/", views.question_detail, name="detail"),
    path("import/", views.question_import, name="import"),
    path("imports/<int:pk>/", views.import_detail, name="import_detail"),
]
