# A run records the rules it is scored under (its problem set's to begin with); an evaluation the
# rules it was asked to apply.

import django.db.models.deletion
from django.db import migrations, models


def runs_take_their_sets_rules(apps, schema_editor):
    Run = apps.get_model("leaderboard", "Run")
    ProblemSet = apps.get_model("problems", "ProblemSet")
    for problem_set in ProblemSet.objects.all():
        Run.objects.filter(problem_set=problem_set).update(rules_id=problem_set.rules_id)


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0011_kernel_latest_speedup'),
        ('problems', '0003_scoring_rules'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='rules',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='problems.scoringrules'),
        ),
        migrations.RunPython(runs_take_their_sets_rules, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='run',
            name='rules',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='problems.scoringrules'),
        ),
        migrations.AddField(
            model_name='evaluation',
            name='rules',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='problems.scoringrules'),
        ),
    ]
