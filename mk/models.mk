# Typed OVSDB models generated from the installed .ovsschema files (tools/gen-models.ts).
MODELS_DIR := src/ovsdb/models
GEN_MODELS := node --import tsx tools/gen-models.ts

.PHONY: models models-check
models:
	$(GEN_MODELS) --out-dir $(MODELS_DIR)

# Fails when the committed models differ from what the installed schemas generate.
models-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GEN_MODELS) --out-dir "$$tmp" >/dev/null && \
	if diff -r "$$tmp" $(MODELS_DIR); then echo "models are up to date"; \
	else echo "models are stale: run 'make models' and commit $(MODELS_DIR)" >&2; exit 1; fi
