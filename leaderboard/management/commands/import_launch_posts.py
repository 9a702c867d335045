from leaderboard.ingest import launch_posts
from leaderboard.management.table_import import TableImportCommand


class Command(TableImportCommand):
    help = (
        "Import launch posts from a CSV with the columns date, lab, model, title, url, lists_kernelbench, "
        "kernelbench_score. Posts are known by url: a second import changes nothing."
    )
    noun = "launch posts"
    store_rows = staticmethod(launch_posts.store_rows)

    def read_rows(self, text: str, name: str) -> list:
        return launch_posts.read_csv(text, name=name)
