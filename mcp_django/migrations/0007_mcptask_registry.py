# The registry a task's tool is on (several endpoints per project); numbered after the
# endpoints' own 0006.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_django", "0005_audit_event_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcptask",
            name="registry",
            field=models.CharField(blank=True, default="", max_length=200, verbose_name="registry"),
        ),
    ]
