"""Analysis and reports: collapse, inverted difficulty, shortcuts, generalization, plots.

    tomrl report RUN_DIR... [--out DIR]        # tomrl.analysis.command
    tomrl report --study STUDY_DIR             # the study report (tomrl.analysis.study_report)

Data flows one way:

- ``runs``          reads training-run and evaluation folders (the only module that knows their files);
- ``significance``  the statistics (MOVER-Wilson differences, Cochran–Armitage, window changes);
- ``paired``        paired tests of two arms on the same questions (exact McNemar, paired bootstrap, Holm);
- ``detectors``     reasoning and entropy collapse, inverted difficulty, negative transfer, ID/OOD divergence;
- ``beliefs``       does a trace state a belief (the fidelity reward's parser);
- ``trace_shares``  per step, rollouts naming every asked agent and using self-reflection phrases;
- ``trace_viewer``  the same questions answered by several models, side by side, read against the oracle;
- ``shortcuts``     the model's answers against the audit's no-ToM heuristics;
- ``plots``         PNG figures (matplotlib, Agg);
- ``document``      the report as data, rendered to self-contained HTML and Markdown;
- ``report``        assembles the sections and writes report.html, report.md, PNGs, detectors.json;
- ``study_report``  the report of a ``tomrl study`` folder: generalization matrix, checkpoints, seeds, arms.

See docs/analysis.md.
"""
