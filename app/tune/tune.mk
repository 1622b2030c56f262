# `python -m app tune`'s tests start a PostgreSQL server on 127.0.0.1: Debian's postgresql package, installed
# without network beyond the package registry (its own service is not used).
.PHONY: postgresql
test: postgresql

postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null \
		&& command -v apt-get >/dev/null; then \
		$(SUDO) apt-get install -y -qq postgresql \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq postgresql; }; \
	fi
