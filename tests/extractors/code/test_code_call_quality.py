"""Call-graph quality on the multi-language fixture project, against hand-written ground truth.

EXPECTED_CALLS lists every call from project code to a project definition, read off the fixture
sources by hand (constructor calls point at the class). Library calls are not listed: an edge to
them would be invented.
"""

from __future__ import annotations

from graphmem.model import RelType

PY = "python/shop/"
JS = "javascript/"
TS = "typescript/src/"
GO = "go/"
JAVA = "java/src/main/java/com/acme/"
RS = "rust/src/"


def sym(path: str, qualname: str) -> str:
    return f"sym:{path}::{qualname}"


EXPECTED_CALLS: set[tuple[str, str]] = {
    # Python: shop/models.py
    (sym(PY + "models.py", "Invoice.total"), sym(PY + "util/money.py", "round_cents")),
    (sym(PY + "models.py", "Invoice.total"), sym(PY + "models.py", "Invoice.tax_rate")),
    (sym(PY + "models.py", "PaidInvoice.total"), sym(PY + "models.py", "Invoice.total")),
    (sym(PY + "models.py", "PaidInvoice.receipt"), sym(PY + "models.py", "PaidInvoice.total")),
    (sym(PY + "models.py", "make_invoice"), sym(PY + "models.py", "Invoice")),
    # Python: shop/util/money.py
    (sym(PY + "util/money.py", "format_money"), sym(PY + "util/money.py", "round_cents")),
    # Python: shop/billing.py
    (sym(PY + "billing.py", "Ledger.record"), sym(PY + "util/money.py", "format_money")),
    (sym(PY + "billing.py", "Ledger.record"), sym(PY + "models.py", "Invoice.total")),
    (sym(PY + "billing.py", "Ledger.balance"), sym(PY + "models.py", "Invoice.total")),
    (sym(PY + "billing.py", "BillingService.__init__"), sym(PY + "billing.py", "Ledger")),
    (sym(PY + "billing.py", "BillingService.bill"), sym(PY + "models.py", "make_invoice")),
    (sym(PY + "billing.py", "BillingService.bill"), sym(PY + "billing.py", "Ledger.record")),
    (sym(PY + "billing.py", "BillingService.bill"), sym(PY + "billing.py", "BillingService._audit")),
    (sym(PY + "billing.py", "BillingService.settle"), sym(PY + "models.py", "PaidInvoice")),
    (sym(PY + "billing.py", "BillingService.settle"), sym(PY + "billing.py", "Ledger.record")),
    (sym(PY + "billing.py", "BillingService.settle"), sym(PY + "models.py", "PaidInvoice.receipt")),
    (sym(PY + "billing.py", "BillingService.settle"), sym(PY + "models.py", "PaidInvoice.total")),
    (sym(PY + "billing.py", "BillingService.settle"), sym(PY + "util/money.py", "format_money")),
    (sym(PY + "billing.py", "BillingService._audit"), sym(PY + "billing.py", "BillingService._audit.describe")),
    (sym(PY + "billing.py", "BillingService._audit.describe"), sym(PY + "billing.py", "helper_text")),
    (sym(PY + "billing.py", "main"), sym(PY + "billing.py", "BillingService")),
    (sym(PY + "billing.py", "main"), sym(PY + "billing.py", "Ledger")),
    (sym(PY + "billing.py", "main"), sym(PY + "billing.py", "BillingService.bill")),
    (sym(PY + "billing.py", "main"), sym(PY + "models.py", "make_invoice")),
    (sym(PY + "billing.py", "main"), sym(PY + "models.py", "Invoice.total")),
    ("file:" + PY + "billing.py", sym(PY + "billing.py", "main")),
    # Python: shop/cli.py
    (sym(PY + "cli.py", "entry"), sym(PY + "billing.py", "main")),
    # JavaScript
    (sym(JS + "lib/format.js", "formatTitle"), sym(JS + "lib/text.js", "slugify")),
    (sym(JS + "lib/format.js", "Formatter.format"), sym(JS + "lib/format.js", "formatTitle")),
    (sym(JS + "lib/format.js", "Formatter.formatAll"), sym(JS + "lib/format.js", "Formatter.format")),
    ("file:" + JS + "app.js", sym(JS + "lib/format.js", "Formatter")),
    ("file:" + JS + "app.js", sym(JS + "app.js", "run")),
    (sym(JS + "app.js", "run"), sym(JS + "lib/logger.js", "log")),
    (sym(JS + "app.js", "run"), sym(JS + "lib/format.js", "Formatter.formatAll")),
    # TypeScript
    (sym(TS + "models/user.ts", "User.id"), sym(TS + "models/user.ts", "normalise")),
    (sym(TS + "models/user.ts", "User.greet"), sym(TS + "models/user.ts", "User.id")),
    (sym(TS + "services/repo.ts", "Repo.save"), sym(TS + "services/repo.ts", "log")),
    (sym(TS + "services/repo.ts", "Repo.save"), sym(TS + "models/user.ts", "User.id")),
    (sym(TS + "services/repo.ts", "createRepo"), sym(TS + "services/repo.ts", "Repo")),
    (sym(TS + "services/userService.ts", "UserService.register"), sym(TS + "models/user.ts", "User")),
    (sym(TS + "services/userService.ts", "UserService.register"), sym(TS + "models/user.ts", "normalise")),
    (sym(TS + "services/userService.ts", "UserService.register"), sym(TS + "services/repo.ts", "Repo.save")),
    (sym(TS + "services/userService.ts", "UserService.register"), sym(TS + "models/user.ts", "User.id")),
    (sym(TS + "services/userService.ts", "UserService.find"), sym(TS + "services/repo.ts", "lookup")),
    (sym(TS + "services/userService.ts", "makeService"), sym(TS + "services/userService.ts", "UserService")),
    (sym(TS + "services/userService.ts", "makeService"), sym(TS + "services/repo.ts", "createRepo")),
    (sym(TS + "components/UserCard.tsx", "UserCard"), sym(TS + "services/userService.ts", "makeService")),
    (sym(TS + "components/UserCard.tsx", "UserCard"), sym(TS + "models/user.ts", "User.greet")),
    (sym(TS + "components/UserCard.tsx", "UserCard"), sym(TS + "services/userService.ts", "UserService.register")),
    # Go
    (sym(GO + "internal/store/memory.go", "MemoryStore.Save"), sym(GO + "internal/store/store.go", "Validate")),
    (sym(GO + "internal/checkout/checkout.go", "Service.Checkout"), sym(GO + "internal/store/store.go", "Store.Save")),
    (sym(GO + "internal/checkout/checkout.go", "Service.Checkout"), sym(GO + "internal/checkout/checkout.go", "Auditor.Note")),
    (sym(GO + "internal/checkout/checkout.go", "Service.Checkout"), sym(GO + "internal/checkout/checkout.go", "describe")),
    (sym(GO + "cmd/server/main.go", "main"), sym(GO + "internal/checkout/checkout.go", "New")),
    (sym(GO + "cmd/server/main.go", "main"), sym(GO + "internal/store/memory.go", "NewMemoryStore")),
    (sym(GO + "cmd/server/main.go", "main"), sym(GO + "internal/checkout/checkout.go", "Service.Checkout")),
    # Java
    (sym(JAVA + "billing/Invoice.java", "Invoice.total"), sym(JAVA + "billing/Invoice.java", "Invoice.tax")),
    (sym(JAVA + "util/Strings.java", "Strings.normalize"), sym(JAVA + "util/Strings.java", "Strings.pad")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "billing/Invoice.java", "Invoice")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "util/Strings.java", "Strings.normalize")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "billing/Repository.java", "Repository.save")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "billing/BaseService.java", "BaseService.log")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "util/Strings.java", "Strings.pad")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue"), sym(JAVA + "billing/Invoice.java", "Invoice.customer")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.outstanding"), sym(JAVA + "billing/Repository.java", "Repository.all")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.outstanding"), sym(JAVA + "billing/Invoice.java", "Invoice.total")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.main"), sym(JAVA + "billing/InvoiceService.java", "InvoiceService")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.main"), sym(JAVA + "billing/InMemoryRepository.java", "InMemoryRepository")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.main"), sym(JAVA + "billing/InvoiceService.java", "InvoiceService.issue")),
    (sym(JAVA + "billing/InvoiceService.java", "InvoiceService.main"), sym(JAVA + "billing/InvoiceService.java", "InvoiceService.outstanding")),
    # Rust
    (sym(RS + "lib.rs", "open"), sym(RS + "ledger.rs", "Ledger.new")),
    (sym(RS + "lib.rs", "open"), sym(RS + "ledger.rs", "Ledger.push")),
    (sym(RS + "lib.rs", "open"), sym(RS + "ledger.rs", "Entry.credit")),
    (sym(RS + "ledger.rs", "Balance.describe"), sym(RS + "util/fmt.rs", "cents")),
    (sym(RS + "ledger.rs", "Balance.describe"), sym(RS + "ledger.rs", "Balance.balance")),
    (sym(RS + "ledger.rs", "Ledger.summary"), sym(RS + "ledger.rs", "Balance.describe")),
    (sym(RS + "ledger.rs", "Ledger.fmt"), sym(RS + "ledger.rs", "Ledger.summary")),
}


def test_call_edge_precision_and_recall(project_graph):
    found = {(r.src, r.dst) for r in project_graph.rels if r.type is RelType.CALLS}
    true_positives = found & EXPECTED_CALLS
    precision = len(true_positives) / len(found) if found else 0.0
    recall = len(true_positives) / len(EXPECTED_CALLS)
    print(
        f"\ncall edges: expected={len(EXPECTED_CALLS)} found={len(found)} correct={len(true_positives)} "
        f"precision={precision:.3f} recall={recall:.3f}"
    )
    for src, dst in sorted(found - EXPECTED_CALLS):
        print(f"  unexpected: {src} -> {dst}")
    for src, dst in sorted(EXPECTED_CALLS - found):
        print(f"  missed:     {src} -> {dst}")
    assert precision >= 0.9
    assert recall >= 0.9


def test_call_edges_carry_resolution_and_lines(project_graph):
    for rel in project_graph.rels:
        if rel.type is not RelType.CALLS:
            continue
        assert isinstance(rel.props["resolution"], str) and rel.props["resolution"]
        assert rel.props["lines"] and all(isinstance(n, int) and n > 0 for n in rel.props["lines"])
        assert 0.0 < rel.provenance.confidence <= 1.0
        # The fact was read from the caller's file.
        caller_path = rel.src[5:] if rel.src.startswith("file:") else rel.src[4:].partition("::")[0]
        assert rel.provenance.source_path == caller_path


def test_unresolved_calls_stay_on_the_caller(project_graph):
    nodes = {n.key: n for n in project_graph.nodes}
    entry = nodes[sym(PY + "cli.py", "entry")]
    # Neither a module missing from the project nor a library call becomes an edge.
    assert entry.props["unresolved_calls"] == ["mystery", "requests.get"]
    targets = {r.dst for r in project_graph.rels if r.type is RelType.CALLS and r.src == entry.key}
    assert targets == {sym(PY + "billing.py", "main")}
    # Builtins are dropped.
    assert "print" not in nodes[sym(PY + "billing.py", "main")].props.get("unresolved_calls", [])
