"""What the ingesting endpoints share: the all-or-nothing POST of table rows (reported scores,
launch posts), the counts an import replies with, and the reply listing every row error."""

from __future__ import annotations

from django.template.defaultfilters import pluralize
from rest_framework import serializers, status
from rest_framework.response import Response

from leaderboard.api.common import table_max_bytes
from leaderboard.api.parsers import BoundedMultiPartParser, CsvParser, StrictJSONParser
from leaderboard.ingest.uploads import RowErrors, read_upload


class CsvUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A CSV file with a header row.")


class ImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class RowErrorsSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.CharField())


TABLE_RESPONSES = {201: ImportResultSerializer, 200: ImportResultSerializer, 400: RowErrorsSerializer}


def import_counts(report) -> dict:
    """An ImportReport as ImportResultSerializer shows it."""
    return {
        "created": report.counts["created"],
        "updated": report.counts["updated"],
        "unchanged": report.counts["unchanged"],
        "warnings": report.warnings,
    }


def row_errors_reply(errors: list[str], noun: str) -> dict:
    """A 400 body (RowErrorsSerializer): nothing was written, and here is every problem."""
    count = f"{len(errors)} error{pluralize(len(errors))}"
    return {"detail": f"Nothing was imported: {count} in the {noun}.", "errors": errors}


class TableIngestMixin:
    """POST of rows as JSON (one object or a list), as a CSV body (text/csv) or as a CSV `file`
    (multipart). All or nothing: any bad row gives 400 listing every error, and nothing is written."""

    parser_classes = [StrictJSONParser, CsvParser, BoundedMultiPartParser]
    noun = "rows"

    def body_max_bytes(self) -> int:
        return table_max_bytes()

    def parse_json(self, data):  # pragma: no cover - overridden
        raise NotImplementedError

    def parse_csv(self, text: str, name: str):  # pragma: no cover - overridden
        raise NotImplementedError

    def store(self, rows, user):  # pragma: no cover - overridden
        raise NotImplementedError

    def create(self, request, *args, **kwargs):
        try:
            rows = self._parse(request)
        except RowErrors as exc:
            return Response(row_errors_reply(exc.errors, self.noun), status=status.HTTP_400_BAD_REQUEST)
        report = self.store(rows, request.user)
        body = import_counts(report)
        return Response(body, status=status.HTTP_201_CREATED if report.counts["created"] else status.HTTP_200_OK)

    def _parse(self, request):
        data = request.data
        if isinstance(data, str):
            return self.parse_csv(data, "CSV body")
        if "file" in getattr(request, "FILES", {}):
            upload = request.FILES["file"]
            return self.parse_csv(read_upload(upload, table_max_bytes()), upload.name)
        if request.content_type.startswith("multipart/"):
            raise RowErrors(["send the CSV as a multipart field named `file`"])
        return self.parse_json(data)
