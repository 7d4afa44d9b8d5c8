from django.urls import path

from memory_service.memories.api import views

urlpatterns = [
    path("memories", views.MemoryListApi.as_view(), name="memory-list"),
    path("memories/bulk", views.MemoryBulkCreateApi.as_view(), name="memory-bulk"),
    path("memories/<str:memory_id>", views.MemoryDetailApi.as_view(), name="memory-detail"),
    path("memories/<str:memory_id>/supersede", views.MemorySupersedeApi.as_view(), name="memory-supersede"),
    path("memories/<str:memory_id>/promote", views.MemoryPromoteApi.as_view(), name="memory-promote"),
    path("sessions/<str:session>/notes/<str:name>", views.SessionNoteApi.as_view(), name="session-note"),
    path("search", views.SearchApi.as_view(), name="search"),
    path("decisions", views.DecisionListApi.as_view(), name="decision-list"),
    path("activity", views.ActivityListApi.as_view(), name="activity-list"),
]
