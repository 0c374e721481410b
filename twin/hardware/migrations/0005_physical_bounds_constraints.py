"""Sane bounds on physical figures (issue 11): the CheckConstraints, once the previous
migration has brought stored figures into range (in its own transaction)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('hardware', '0004_physical_bounds'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='acceleratortype',
            constraint=models.CheckConstraint(condition=models.Q(('bf16_tflops__lte', 1000000), ('hbm_gib__lte', 100000), ('hbm_tbps__lte', 100000), ('tdp_w__gte', 1), ('tdp_w__lte', 50000), ('scaleup_links__lte', 1024), ('scaleup_gbps__lte', 1000000), ('fp32_tflops__gte', 0), ('fp32_tflops__lte', 1000000), ('tf32_tflops__gte', 0), ('tf32_tflops__lte', 1000000), ('fp8_tflops__gte', 0), ('fp8_tflops__lte', 1000000)), name='accelerator_figures_bounded'),
        ),
        migrations.AddConstraint(
            model_name='link',
            constraint=models.CheckConstraint(condition=models.Q(('bandwidth_gbps__lte', 100000), ('latency_ns__lte', 10000000)), name='link_figures_bounded'),
        ),
        migrations.AddConstraint(
            model_name='networkdevice',
            constraint=models.CheckConstraint(condition=models.Q(('ports__lte', 4096), ('port_gbps__lte', 100000), ('latency_ns__lte', 1000000), ('power_w__lte', 100000)), name='device_figures_bounded'),
        ),
        migrations.AddConstraint(
            model_name='rack',
            constraint=models.CheckConstraint(condition=models.Q(('power_budget_w__lte', 1000000), ('pue__lte', 3.0)), name='rack_figures_bounded'),
        ),
        migrations.AddConstraint(
            model_name='server',
            constraint=models.CheckConstraint(condition=models.Q(('cards_per_server__lte', 64), ('overhead_w__lte', 50000), ('nic_count__lte', 64), ('nic_gbps__lte', 100000)), name='server_figures_bounded'),
        ),
        migrations.AddConstraint(
            model_name='supernode',
            constraint=models.CheckConstraint(condition=models.Q(('card_count__lte', 65536), ('link_gbps__lte', 100000), ('link_latency_ns__lte', 10000000), ('switch_latency_ns__lte', 1000000)), name='supernode_figures_bounded'),
        ),
    ]
