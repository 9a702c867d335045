"""Who may write: a signed-in user holding one named Django permission. Reading stays public."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from leaderboard.ingest.submissions import SUBMIT_PERMISSION


class ModelPermission(BasePermission):
    """Reads for everyone; a write needs `perm` (e.g. "leaderboard.add_kernel").

    Subclass with `perm = ...`, or use `requires("app.codename")` in `permission_classes`.
    """

    perm: str = ""

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(self.perm))


def requires(perm: str) -> type[ModelPermission]:
    return type(f"Requires_{perm.replace('.', '_')}", (ModelPermission,), {"perm": perm})


CanAddReportedScore = requires("leaderboard.add_reportedscore")
CanAddLaunchPost = requires("leaderboard.add_launchpost")
CanImportRun = requires("leaderboard.add_run")
CanSubmitKernel = requires(SUBMIT_PERMISSION)
CanRequestEvaluation = requires("leaderboard.add_evaluation")
