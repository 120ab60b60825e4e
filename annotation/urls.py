from django.urls import path

from annotation.demonstrations import views as demo
from annotation.feedback import guidelines
from annotation.feedback import views as tasks
from annotation.workforce import feedback_views as workforce

app_name = "annotation"
urlpatterns = [
    path("demonstrations/", demo.landing, name="next_question"),
    path("demonstrations/start/", demo.start, name="start"),
    path("demonstrations/history/", demo.history, name="history"),
    path("demonstrations/instructions/", demo.instructions, name="instructions"),
    path("demonstrations/episodes/<int:pk>/", demo.episode_page, name="episode"),
    path("demonstrations/episodes/<int:pk>/page/", demo.page_snapshot, name="page_snapshot"),
    path("demonstrations/episodes/<int:pk>/act/", demo.act, name="act"),
    path("demonstrations/episodes/<int:pk>/quotes/remove/", demo.remove_quote, name="remove_quote"),
    path("demonstrations/episodes/<int:pk>/heartbeat/", demo.heartbeat, name="heartbeat"),
    path("demonstrations/episodes/<int:pk>/draft/", demo.draft, name="draft"),
    path("demonstrations/episodes/<int:pk>/answer/", demo.answer, name="answer"),
    path("demonstrations/episodes/<int:pk>/browse-again/", demo.browse_again, name="browse_again"),
    path("demonstrations/episodes/<int:pk>/note/", demo.note, name="note"),
    path("demonstrations/episodes/<int:pk>/skip/", demo.skip, name="skip"),
    path("demonstrations/episodes/<int:pk>/review/", workforce.episode_review, name="episode_review"),
    path("tasks/", tasks.landing, name="next_task"),
    path("tasks/start/", tasks.start, name="task_start"),
    path("tasks/<int:pk>/", tasks.task_page, name="task"),
    path("tasks/<int:pk>/draft/", tasks.draft, name="task_draft"),
    path("tasks/<int:pk>/submit/", tasks.submit, name="task_submit"),
    path("tasks/<int:pk>/skip/", tasks.skip, name="task_skip"),
    path("tasks/<int:pk>/heartbeat/", tasks.heartbeat, name="task_heartbeat"),
    path("tasks/<int:pk>/steps/<int:index>/page/", tasks.step_page, name="task_step_page"),
    path("quality/", workforce.my_quality, name="my_quality"),
    path("tasks/guidelines/", guidelines.index, name="guidelines"),
    path("tasks/guidelines/<slug:template>/", guidelines.template_guidelines, name="template_guidelines"),
    path(
        "tasks/guidelines/<slug:template>/<slug:preset>/",
        guidelines.preset_guidelines,
        name="preset_guidelines",
    ),
]
