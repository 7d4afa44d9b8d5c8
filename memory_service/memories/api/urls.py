from django.urls import path

from memory_service.memories.api.views import MemoryDetailApi, MemoryListApi

urlpatterns = [
    path("memories", MemoryListApi.as_view(), name="memory-list"),
    path("memories/<str:memory_id>", MemoryDetailApi.as_view(), name="memory-detail"),
]
