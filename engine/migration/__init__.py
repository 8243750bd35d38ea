"""Migration planning for key groups whose state must cross machines (Megaphone)."""

from engine.migration.megaphone import MigrationStep, plan_migration

__all__ = ["MigrationStep", "plan_migration"]
