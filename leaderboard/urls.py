from django.urls import path

from leaderboard import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("levels/", views.levels_index, name="levels"),
    path("levels/<str:level>/", views.level_board, name="level-board"),
    path("levels/<str:level>/grid/", views.level_grid, name="level-grid"),
    path("models/", views.models_index, name="models"),
    path("models/<slug:slug>/", views.model_detail, name="model-detail"),
    path("problems/", views.problems_index, name="problems"),
    path("problems/<int:pk>/", views.problem_detail, name="problem-detail"),
    path("problems/<int:pk>/submit/", views.problem_submit, name="problem-submit"),
    path("kernels/<int:pk>/", views.kernel_detail, name="kernel-detail"),
    path("reported/", views.reported_index, name="reported"),
    path("search/", views.search, name="search"),
]
