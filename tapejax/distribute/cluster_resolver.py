"""``tf.distribute.cluster_resolver``: where the cluster is described (``TF_CONFIG``)."""

from __future__ import annotations

from ._strategy import ClusterSpec, TFConfigClusterResolver

__all__ = ["ClusterSpec", "TFConfigClusterResolver"]
