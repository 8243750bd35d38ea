from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0013_sink_targets"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="state_discarded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
