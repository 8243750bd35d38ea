from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0007_runepoch_broker'),
    ]

    operations = [
        migrations.AddField(
            model_name='runepoch',
            name='load',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
