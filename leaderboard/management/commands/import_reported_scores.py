from leaderboard.ingest import reported_scores
from leaderboard.management.table_import import TableImportCommand


class Command(TableImportCommand):
    help = "Import reported scores from a CSV with the columns of data/reported_scores.csv."
    noun = "reported scores"
    store_rows = staticmethod(reported_scores.store_rows)

    def read_rows(self, text: str, name: str) -> list:
        return reported_scores.read_csv(text, name=name)
