from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0005_metric_minutes'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='assignment',
            field=models.JSONField(default=dict),
        ),
    ]
