"""Sane bounds on physical figures (issue 11): the validators, and stored figures
brought into range.

Rows written before the bounds existed may hold a figure past one (a rack budget
of 10^15 W was accepted). The constraints (next migration) could not be added
over them, so such figures are brought to the nearest bound (``clamp_figures``,
which prints what it changed); no row is deleted. The bounds are copied here as
they were when this migration was written (``twin.hardware.constants``). The
constraints are a migration of their own: PostgreSQL refuses to ALTER a table
whose rows this transaction updated while their deferred foreign-key checks
are still pending.
"""

import twin.core.bounds
from django.db import migrations, models


# (model, field, lowest, highest): the ranges the new constraints enforce.
BOUNDS = [
    ("Rack", "power_budget_w", 1, 1_000_000), ("Rack", "pue", 1.0, 3.0),
    ("Server", "cards_per_server", 1, 64), ("Server", "overhead_w", 0, 50_000),
    ("Server", "nic_count", 0, 64), ("Server", "nic_gbps", 0, 100_000),
    ("NetworkDevice", "ports", 1, 4_096), ("NetworkDevice", "port_gbps", 1, 100_000),
    ("NetworkDevice", "latency_ns", 0, 1_000_000), ("NetworkDevice", "power_w", 0, 100_000),
    ("Link", "bandwidth_gbps", None, 100_000), ("Link", "latency_ns", 0, 10_000_000),
    ("SuperNode", "card_count", 1, 65_536), ("SuperNode", "link_gbps", None, 100_000),
    ("SuperNode", "link_latency_ns", 0, 10_000_000),
    ("SuperNode", "switch_latency_ns", 0, 1_000_000),
    ("AcceleratorType", "bf16_tflops", None, 1_000_000),
    ("AcceleratorType", "fp32_tflops", 0, 1_000_000),
    ("AcceleratorType", "tf32_tflops", 0, 1_000_000),
    ("AcceleratorType", "fp8_tflops", 0, 1_000_000),
    ("AcceleratorType", "hbm_gib", None, 100_000), ("AcceleratorType", "hbm_tbps", None, 100_000),
    ("AcceleratorType", "tdp_w", 1, 50_000), ("AcceleratorType", "scaleup_links", 0, 1_024),
    ("AcceleratorType", "scaleup_gbps", 0, 1_000_000),
]


def clamp_figures(apps, schema_editor):
    for model_name, field, low, high in BOUNDS:
        model = apps.get_model("hardware", model_name)
        for lookup, value in (("lt", low), ("gt", high)):
            if value is None:
                continue
            changed = model.objects.filter(**{f"{field}__{lookup}": value}).update(
                **{field: value})
            if changed:
                print(f"\n  {model_name}.{field}: {changed} row(s) out of bounds set to {value}")


class Migration(migrations.Migration):

    dependencies = [
        ('hardware', '0003_clusterbuild_job'),
    ]

    operations = [
        migrations.AlterField(
            model_name='acceleratortype',
            name='bf16_tflops',
            field=models.FloatField(validators=[twin.core.bounds.AtLeast(0, 'TFLOP/s'), twin.core.bounds.AtMost(1000000, 'TFLOP/s')], verbose_name='BF16/FP16 TFLOP/s'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='fp32_tflops',
            field=models.FloatField(blank=True, null=True, validators=[twin.core.bounds.AtLeast(0, 'TFLOP/s'), twin.core.bounds.AtMost(1000000, 'TFLOP/s')], verbose_name='FP32 TFLOP/s'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='fp8_tflops',
            field=models.FloatField(blank=True, null=True, validators=[twin.core.bounds.AtLeast(0, 'TFLOP/s'), twin.core.bounds.AtMost(1000000, 'TFLOP/s')], verbose_name='FP8 TFLOP/s'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='hbm_gib',
            field=models.FloatField(validators=[twin.core.bounds.AtLeast(0, 'GiB'), twin.core.bounds.AtMost(100000, 'GiB')], verbose_name='HBM (GiB)'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='hbm_tbps',
            field=models.FloatField(validators=[twin.core.bounds.AtLeast(0, 'TB/s'), twin.core.bounds.AtMost(100000, 'TB/s')], verbose_name='HBM bandwidth (TB/s)'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='idle_w',
            field=models.PositiveIntegerField(validators=[twin.core.bounds.AtLeast(0, 'W'), twin.core.bounds.AtMost(50000, 'W')], verbose_name='Idle (W)'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='scaleup_gbps',
            field=models.FloatField(help_text='Aggregate bidirectional, as on the datasheet.', validators=[twin.core.bounds.AtLeast(0, 'GB/s'), twin.core.bounds.AtMost(1000000, 'GB/s')], verbose_name='Scale-up bandwidth (GB/s)'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='scaleup_links',
            field=models.PositiveSmallIntegerField(validators=[twin.core.bounds.AtLeast(0, 'links'), twin.core.bounds.AtMost(1024, 'links')], verbose_name='Scale-up links'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='tdp_w',
            field=models.PositiveIntegerField(validators=[twin.core.bounds.AtLeast(1, 'W'), twin.core.bounds.AtMost(50000, 'W')], verbose_name='TDP (W)'),
        ),
        migrations.AlterField(
            model_name='acceleratortype',
            name='tf32_tflops',
            field=models.FloatField(blank=True, null=True, validators=[twin.core.bounds.AtLeast(0, 'TFLOP/s'), twin.core.bounds.AtMost(1000000, 'TFLOP/s')], verbose_name='TF32 TFLOP/s'),
        ),
        migrations.AlterField(
            model_name='link',
            name='bandwidth_gbps',
            field=models.FloatField(help_text='Per direction.', validators=[twin.core.bounds.AtMost(100000, 'Gb/s')], verbose_name='Bandwidth (Gb/s)'),
        ),
        migrations.AlterField(
            model_name='link',
            name='latency_ns',
            field=models.FloatField(validators=[twin.core.bounds.AtLeast(0, 'ns'), twin.core.bounds.AtMost(10000000, 'ns')], verbose_name='Latency (ns)'),
        ),
        migrations.AlterField(
            model_name='networkdevice',
            name='latency_ns',
            field=models.FloatField(default=0, validators=[twin.core.bounds.AtLeast(0, 'ns'), twin.core.bounds.AtMost(1000000, 'ns')], verbose_name='Forwarding latency (ns)'),
        ),
        migrations.AlterField(
            model_name='networkdevice',
            name='port_gbps',
            field=models.PositiveIntegerField(validators=[twin.core.bounds.AtLeast(1, 'Gb/s'), twin.core.bounds.AtMost(100000, 'Gb/s')], verbose_name='Port speed (Gb/s)'),
        ),
        migrations.AlterField(
            model_name='networkdevice',
            name='ports',
            field=models.PositiveSmallIntegerField(validators=[twin.core.bounds.AtLeast(1, 'ports'), twin.core.bounds.AtMost(4096, 'ports')]),
        ),
        migrations.AlterField(
            model_name='networkdevice',
            name='power_w',
            field=models.PositiveIntegerField(validators=[twin.core.bounds.AtLeast(0, 'W'), twin.core.bounds.AtMost(100000, 'W')], verbose_name='Power (W)'),
        ),
        migrations.AlterField(
            model_name='rack',
            name='power_budget_w',
            field=models.PositiveIntegerField(default=40000, validators=[twin.core.bounds.AtLeast(1, 'W'), twin.core.bounds.AtMost(1000000, 'W')], verbose_name='Power budget (W)'),
        ),
        migrations.AlterField(
            model_name='rack',
            name='pue',
            field=models.FloatField(default=1.05, validators=[twin.core.bounds.AtLeast(1.0, message='PUE is facility power over IT power: it cannot be below 1.0.'), twin.core.bounds.AtMost(3.0, message='A PUE above 3.0 is no working data centre (the worst surveyed are near 2.5).')], verbose_name='PUE'),
        ),
        migrations.AlterField(
            model_name='server',
            name='cards_per_server',
            field=models.PositiveSmallIntegerField(default=8, validators=[twin.core.bounds.AtLeast(1, 'cards'), twin.core.bounds.AtMost(64, 'cards')]),
        ),
        migrations.AlterField(
            model_name='server',
            name='nic_count',
            field=models.PositiveSmallIntegerField(default=2, validators=[twin.core.bounds.AtLeast(0, 'NICs'), twin.core.bounds.AtMost(64, 'NICs')], verbose_name='NICs'),
        ),
        migrations.AlterField(
            model_name='server',
            name='nic_gbps',
            field=models.PositiveIntegerField(default=400, validators=[twin.core.bounds.AtLeast(0, 'Gb/s'), twin.core.bounds.AtMost(100000, 'Gb/s')], verbose_name='NIC speed (Gb/s)'),
        ),
        migrations.AlterField(
            model_name='server',
            name='overhead_w',
            field=models.PositiveIntegerField(default=1800, help_text='CPU, memory, NIC and fan draw besides cards.', validators=[twin.core.bounds.AtLeast(0, 'W'), twin.core.bounds.AtMost(50000, 'W')], verbose_name='Overhead (W)'),
        ),
        migrations.AlterField(
            model_name='supernode',
            name='card_count',
            field=models.PositiveIntegerField(help_text='Cards the fabric is designed for.', validators=[twin.core.bounds.AtLeast(1, 'cards'), twin.core.bounds.AtMost(65536, 'cards')]),
        ),
        migrations.AlterField(
            model_name='supernode',
            name='link_gbps',
            field=models.FloatField(help_text='Per link, per direction.', validators=[twin.core.bounds.AtMost(100000, 'Gb/s')], verbose_name='Link bandwidth (Gb/s)'),
        ),
        migrations.AlterField(
            model_name='supernode',
            name='link_latency_ns',
            field=models.FloatField(validators=[twin.core.bounds.AtLeast(0, 'ns'), twin.core.bounds.AtMost(10000000, 'ns')], verbose_name='Link latency (ns)'),
        ),
        migrations.AlterField(
            model_name='supernode',
            name='switch_latency_ns',
            field=models.FloatField(default=0, help_text='Added per switch traversed (star, fat tree).', validators=[twin.core.bounds.AtLeast(0, 'ns'), twin.core.bounds.AtMost(1000000, 'ns')], verbose_name='Switch latency (ns)'),
        ),
        migrations.RunPython(clamp_figures, migrations.RunPython.noop),
    ]
