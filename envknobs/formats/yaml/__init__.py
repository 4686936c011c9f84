"""The YAML target formats and what they share.

* :mod:`.k8s` -- the ``k8s`` format: the ``env:`` list of one container of a manifest;
* :mod:`.map` -- the ``yaml-map`` format: a mapping of knobs (an engine ``--config``
  file, or an env map at a key path of a bigger file);
* :mod:`.containers` -- finding containers in manifests and addressing one of them;
* :mod:`.edit` -- composing documents with exact source marks, and splicing new text
  into the YAML source byte-exactly;
* :mod:`.scalar` -- reading and rendering scalars the way YAML 1.1 and 1.2 readers agree on;
* :mod:`.keys` -- the names a ``yaml-map`` key may have.
"""
