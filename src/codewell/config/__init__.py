"""Site configuration: one JSON-with-comments file, validated by a typed schema, reloaded when it changes."""

from codewell.config.schema import SiteConfig
from codewell.config.store import SiteConfigStore, parse_site_config

__all__ = ["SiteConfig", "SiteConfigStore", "parse_site_config"]
