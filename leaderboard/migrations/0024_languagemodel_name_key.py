"""Names compared by their skeleton (problems.text.name_skeleton): every model gets its name_key,
and every alias's key is recomputed. Look-alike names stored before stay two records (their keys
get " #<id>" so they stay unique) until an admin merges them; nothing is merged here."""

from django.db import migrations, models

from problems.text import name_skeleton


def keys(rows, text_of):
    """A unique skeleton key per row, in id order; a later row whose skeleton is taken keeps " #<id>"."""
    seen, out = set(), {}
    for row in rows:
        key = name_skeleton(text_of(row))
        if key in seen or not key:
            key = f"{key} #{row.pk}"
        seen.add(key)
        out[row.pk] = key
    return out


def fill(apps, schema_editor):
    LanguageModel = apps.get_model("leaderboard", "LanguageModel")
    for pk, key in keys(LanguageModel.objects.order_by("pk"), lambda m: m.name).items():
        LanguageModel.objects.filter(pk=pk).update(name_key=key)
    ModelAlias = apps.get_model("leaderboard", "ModelAlias")
    wanted = keys(ModelAlias.objects.order_by("pk"), lambda a: a.alias)
    for pk in wanted:  # two passes: a new key may be another row's old one
        ModelAlias.objects.filter(pk=pk).update(key=f"#migrating {pk}")
    for pk, key in wanted.items():
        ModelAlias.objects.filter(pk=pk).update(key=key[:200])


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0023_dirtyproblem_dirtyrun_whole")]

    operations = [
        migrations.AddField(
            model_name="languagemodel",
            name="name_key",
            field=models.CharField(default="", editable=False, help_text="alias_key(name).", max_length=400),
            preserve_default=False,
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="languagemodel",
            name="name_key",
            field=models.CharField(editable=False, help_text="alias_key(name).", max_length=400, unique=True),
        ),
    ]
