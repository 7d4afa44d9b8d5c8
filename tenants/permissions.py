from rest_framework.permissions import BasePermission

from memory_service.exceptions import PermissionDeniedError
from tenants.access import Principal


class HasTokenPermission(BasePermission):
    """Allow an authenticated token that holds the view's ``required_permission``.

    Views declare ``required_permission`` (a ``tenants.models.Permission``); a view without one
    needs only a valid token. A missing token is a 401, a missing permission a 403 naming it.
    """

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if not isinstance(token, Principal):
            return False
        required = getattr(view, "required_permission", None)
        if required is not None and not token.has_permission(required):
            raise PermissionDeniedError(f"The token lacks the '{required}' permission.")
        return True
