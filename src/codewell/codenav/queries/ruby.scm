; Ruby definitions, identifier occurrences and require calls (codewell codenav).
(method name: (_) @name) @definition.method
(singleton_method name: (_) @name) @definition.method
(class name: [(constant) @name (scope_resolution name: (constant) @name)]) @definition.class
(module name: [(constant) @name (scope_resolution name: (constant) @name)]) @definition.module
(assignment left: (constant) @name) @definition.constant
(call method: (identifier) @_attr arguments: (argument_list (simple_symbol) @name)
  (#match? @_attr "^attr_(reader|writer|accessor)$")) @definition.field
(identifier) @reference
(constant) @reference
(call method: (identifier) @_req (#match? @_req "^(require|require_relative|load)$")) @import
