# KernelBench's scoring rules per version (problems.models.RULE_PRESETS). A problem set's old
# atol/rtol override becomes a rule set of its own; other sets get the preset of their version label
# ("v0", "v0.1") or, failing that, KernelBench's current rules.

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

import problems.models


def _preset(ScoringRules, slug):
    rules, _ = ScoringRules.objects.get_or_create(slug=slug, defaults=problems.models.RULE_PRESETS[slug])
    return rules


def _rules_for(ScoringRules, problem_set):
    if problem_set.atol is not None or problem_set.rtol is not None:
        tol = problem_set.atol if problem_set.atol is not None else problem_set.rtol
        rules, _ = ScoringRules.objects.get_or_create(
            slug=f"custom-{problem_set.slug}"[:60],
            defaults={"name": f"Custom ({problem_set.name})"[:120], "kernelbench_version": problem_set.version or "custom",
                      "fp32_tolerance": tol, "fp16_tolerance": tol, "bf16_tolerance": tol},
        )
        return rules
    version = (problem_set.version or "").strip().lower().lstrip("v")
    slug = {"0": "kernelbench-v0", "0.1": "kernelbench-v0-1"}.get(version, problems.models.CURRENT_RULES)
    return _preset(ScoringRules, slug)


def assign_rules(apps, schema_editor):
    ScoringRules = apps.get_model("problems", "ScoringRules")
    ProblemSet = apps.get_model("problems", "ProblemSet")
    for slug in problems.models.RULE_PRESETS:
        _preset(ScoringRules, slug)
    for problem_set in ProblemSet.objects.all():
        problem_set.rules = _rules_for(ScoringRules, problem_set)
        problem_set.save(update_fields=["rules"])


class Migration(migrations.Migration):

    dependencies = [
        ('problems', '0002_int_ranges'),
    ]

    operations = [
        migrations.CreateModel(
            name='ScoringRules',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=60, unique=True)),
                ('name', models.CharField(max_length=120, unique=True)),
                ('kernelbench_version', models.CharField(help_text='e.g. "v0", "v0.1", "main".', max_length=40)),
                ('fp32_tolerance', models.FloatField(validators=[django.core.validators.MinValueValidator(0.0)])),
                ('fp16_tolerance', models.FloatField(validators=[django.core.validators.MinValueValidator(0.0)])),
                ('bf16_tolerance', models.FloatField(validators=[django.core.validators.MinValueValidator(0.0)])),
                ('correctness_trials', models.PositiveSmallIntegerField(default=5, validators=[django.core.validators.MinValueValidator(1)])),
                ('timing_method', models.CharField(choices=[('cuda_event', 'CUDA events')], default='cuda_event', max_length=20)),
            ],
            options={
                'verbose_name_plural': 'scoring rules',
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='problemset',
            name='rules',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='problem_sets', to='problems.scoringrules'),
        ),
        migrations.RunPython(assign_rules, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='problemset',
            name='rules',
            field=models.ForeignKey(default=problems.models.current_rules_pk, on_delete=django.db.models.deletion.PROTECT, related_name='problem_sets', to='problems.scoringrules'),
        ),
        migrations.RemoveConstraint(
            model_name='problemset',
            name='problemset_atol_nonnegative',
        ),
        migrations.RemoveConstraint(
            model_name='problemset',
            name='problemset_rtol_nonnegative',
        ),
        migrations.RemoveField(
            model_name='problemset',
            name='atol',
        ),
        migrations.RemoveField(
            model_name='problemset',
            name='rtol',
        ),
    ]
