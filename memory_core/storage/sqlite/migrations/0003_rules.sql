-- 0003_rules: lookups the rules knowledge graph makes on every document upsert.
-- A rule's source documents are found by the rule id recorded in the resource metadata; without
-- this expression index each upsert scanned every rule document of the scope (quadratic ingest).
CREATE INDEX resource_scope_kind_rule ON resource(scope, kind, json_extract(metadata, '$.rule_id'));
-- Sections belong to their document: found by resource when a document is updated or removed.
CREATE INDEX entity_resource_kind ON entity(resource_id, kind);
