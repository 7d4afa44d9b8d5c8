from django.urls import path

from proposals.api import views

urlpatterns = [
    path("repositories/<str:repository>/agents-md", views.AgentsMdApi.as_view(), name="agents-md"),
    path("proposals", views.ProposalListApi.as_view(), name="proposal-list"),
    path("proposals/<str:proposal_id>", views.ProposalDetailApi.as_view(), name="proposal-detail"),
]
