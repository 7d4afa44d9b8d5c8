from django.urls import path

from tenants.api.views import TokenListApi, TokenRevokeApi

urlpatterns = [
    path("tokens", TokenListApi.as_view(), name="token-list"),
    path("tokens/<str:prefix>/revoke", TokenRevokeApi.as_view(), name="token-revoke"),
]
