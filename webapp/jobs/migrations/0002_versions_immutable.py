from django.db import migrations

IMMUTABLE = """
CREATE FUNCTION job_version_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'job versions are immutable (version % of job %)', OLD.number, OLD.job_id;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER job_version_immutable
    BEFORE UPDATE ON jobs_jobversion
    FOR EACH ROW EXECUTE FUNCTION job_version_immutable();
"""

DROP = """
DROP TRIGGER IF EXISTS job_version_immutable ON jobs_jobversion;
DROP FUNCTION IF EXISTS job_version_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial")]
    operations = [migrations.RunSQL(IMMUTABLE, DROP)]
