from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0006_run_assignment'),
    ]

    operations = [
        migrations.AddField(
            model_name='runepoch',
            name='broker',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
