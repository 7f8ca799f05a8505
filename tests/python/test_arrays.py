"""Dataset arrays against numpy's np.load of the same graphs as `tpugraphs export` writes them."""

import numpy as np
import pytest

import tpugraphs as tg


def exported_path(out, g):
    parts = g.collection.split(":")
    return out.joinpath("npz", *parts, g.split or "nosplit", g.name + ".npz")


def assert_same_array(ours, theirs, what):
    assert ours.dtype == theirs.dtype, what
    assert ours.shape == theirs.shape, what
    assert ours.tobytes() == theirs.tobytes(), what


def test_every_release_file_equals_np_load_of_its_export(real_dataset, release_files):
    path, out = real_dataset
    ds = tg.Dataset(str(path))
    assert len(ds) == len(release_files)
    seen = 0
    for g in ds.graphs():
        with np.load(exported_path(out, g)) as npz:
            assert sorted(npz.files) == sorted(g.keys())
            ours = g.arrays()
            for name in npz.files:
                assert_same_array(ours[name], npz[name], f"{g.name}:{name}")
                assert_same_array(g[name], npz[name], f"{g.name}:{name}")
        seen += 1
    assert seen == len(release_files)


def test_arrays_equal_the_release_files_themselves(real_dataset, release_files):
    # The original files hold the same values (ingest keeps them bit for bit); dtypes of the
    # original may differ only where the release itself is inconsistent, which these are not.
    ds = tg.Dataset(str(real_dataset[0]))
    by_name = {f.stem: f for f in release_files}
    for g in ds.graphs():
        with np.load(by_name[g.name]) as npz:
            for name in g.keys():
                theirs = npz[name]
                if name == "node_splits":
                    theirs = theirs.reshape(1, -1)
                np.testing.assert_array_equal(g[name], theirs.astype(g[name].dtype),
                                              err_msg=f"{g.name}:{name}")


def test_collections_splits_and_lookup(real_dataset):
    ds = tg.Dataset(str(real_dataset[0]))
    assert ds.collections == ["layout:xla:default", "layout:xla:random", "tile:xla"]
    train = [g.name for g in ds.graphs(collection="layout:xla:random", split="train")]
    assert train == ["openai_v0_rnn_optimized"]
    g = ds.graph("unet_3d.4x4.bf16")
    assert (g.collection, g.split, g.kind) == ("layout:xla:default", "valid", "layout")
    info = ds.info(g.index)
    assert (info["num_nodes"], info["num_configs"]) == (g.num_nodes, g.num_configs)
    assert g.node_feat.dtype == np.float32 and g.node_feat.shape == (g.num_nodes, 140)
    assert g.node_opcode.dtype == np.uint8 and g.edge_index.dtype == np.int64
    with pytest.raises(AttributeError):
        g.config_feat  # a tile array
    t = ds.graph("retinanet.2x2.fp32_-342c949e14733d96", collection="tile:xla")
    assert t.config_feat.shape == (t.num_configs, 24)
    np.testing.assert_array_equal(t.normalized_runtime,
                                  t.config_runtime / t.config_runtime_normalizers)


def test_layout_config_feat_reads_the_configs_asked_for(real_dataset):
    ds = tg.Dataset(str(real_dataset[0]))
    g = ds.graph("openai_v0_rnn_optimized")
    full = g.node_config_feat  # float32 [c, nc, 18], everything
    assert full.dtype == np.float32 and full.shape == (g.num_configs, g.num_config_nodes, 18)
    picks = [g.num_configs - 1, 0, 5, 5]
    part = g.layout_config_feat(picks)
    assert part.dtype == np.int8 and part.shape == (4, g.num_config_nodes, 18)
    np.testing.assert_array_equal(part.astype(np.float32), full[picks])
    np.testing.assert_array_equal(g.layout_config_feat().astype(np.float32), full)
    assert g.layout_config_feat([]).shape == (0, g.num_config_nodes, 18)


def test_arrays_share_the_graph_memory_and_outlive_it(real_dataset):
    ds = tg.Dataset(str(real_dataset[0]))
    g = ds.graph("unet_3d.4x4.bf16")
    a = g.node_feat
    assert not a.flags.owndata and a.base is not None
    expected = a.copy()
    del g, ds
    np.testing.assert_array_equal(a, expected)  # the array keeps its graph alive


def numpy_absent_dimensions(nf):
    """The -1 slots of ingest --mark-absent-dimensions, derived in numpy from the official
    features (docs/ingest.md, "Absent dimensions")."""
    out = nf.copy()

    def leading_at_least_one(first, width):
        ok = nf[:, first:first + width] >= 1
        return np.where(ok.all(axis=1), width, np.argmin(ok, axis=1))

    def pad(first, width, count):
        slot = np.arange(width)[None, :]
        block = out[:, first:first + width]
        block[slot >= count[:, None]] = -1

    rank = leading_at_least_one(21, 6)
    no_layout = (rank >= 2) & np.array(
        [not nf[v, 134:134 + rank[v]].any() for v in range(len(nf))], dtype=bool)
    window = leading_at_least_one(37, 6)
    conv = (nf[:, [93, 94, 99, 100, 105, 106]] != 0).any(axis=1)
    pad(21, 6, rank)
    pad(134, 6, np.where(no_layout, 0, rank))
    for first in (37, 45, 53, 61, 69, 77, 85):
        pad(first, 6, window)
    pad(95, 4, np.where(conv, window, 0))
    pad(101, 4, np.where(conv, window, 0))
    slices = leading_at_least_one(113, 2)
    for first in (109, 113, 117):
        pad(first, 2, slices)
    pad(121, 2, leading_at_least_one(121, 2))
    return out


def test_marked_absent_dimensions_equal_numpy_on_the_release_files(tmp_path, release_files):
    layout = [f for f in release_files if "layout" in f.parts]
    assert layout
    changed = 0
    for f in layout:
        at = f.parts.index("layout")
        collection = f"layout:{f.parts[at + 1]}:{f.parts[at + 2]}"
        marked, official = tmp_path / f"{f.stem}.m.tpug", tmp_path / f"{f.stem}.o.tpug"
        tg.ingest([str(f)], str(marked), collection=collection, mark_absent_dimensions=True)
        tg.ingest([str(f)], str(official), collection=collection)
        g, g_official = tg.Dataset(str(marked)).graph(f.stem), tg.Dataset(str(official)).graph(f.stem)
        assert g.absent_dimensions_marked
        assert not g_official.absent_dimensions_marked
        with np.load(f) as npz:
            np.testing.assert_array_equal(g_official.node_feat, npz["node_feat"])
            want = numpy_absent_dimensions(npz["node_feat"])
            np.testing.assert_array_equal(g.node_feat, want, err_msg=f.name)
            changed += int((want != npz["node_feat"]).sum())
    assert changed > 0
