"""Pages. Thin views: queries live in model QuerySets and leaderboard services."""

from django.shortcuts import get_object_or_404, render

from leaderboard.models import Kernel, LanguageModel, ReportedScore
from problems.models import Problem


def overview(request):
    scores = ReportedScore.objects.select_related("model").order_by("-reported_on")[:20]
    return render(request, "leaderboard/overview.html", {"reported_scores": scores})


def model_detail(request, slug: str):
    model = get_object_or_404(LanguageModel.objects.select_related("lab"), slug=slug)
    return render(request, "leaderboard/model_detail.html", {"model": model})


def problem_detail(request, pk: int):
    problem = get_object_or_404(Problem.objects.select_related("problem_set"), pk=pk)
    return render(request, "leaderboard/problem_detail.html", {"problem": problem})


def kernel_detail(request, pk: int):
    kernel = get_object_or_404(Kernel.objects.select_related("problem", "run__model"), pk=pk)
    return render(request, "leaderboard/kernel_detail.html", {"kernel": kernel})
