// The order view: shows show_order's result (structuredContent), and its button calls the
// app-only tool reorder through the host, which may ask the user to confirm first.
(() => {
  const app = new McpApps.App({ name: "shop-order-view", version: "1.0.0" }, {}, { autoResize: true });
  const main = document.getElementById("order");
  let order = null;

  function cell(text, numeric) {
    const td = document.createElement("td");
    td.textContent = text;
    if (numeric) td.className = "n";
    return td;
  }

  function show(data) {
    order = data;
    main.replaceChildren(document.getElementById("order-template").content.cloneNode(true));
    const field = (name) => main.querySelector(`[data-field="${name}"]`);
    field("id").textContent = `#${data.id}`;
    field("status").textContent = data.status;
    field("total").textContent = data.total;
    field("shipping").textContent = data.shipping;
    for (const line of data.lines) {
      const tr = document.createElement("tr");
      tr.append(cell(line.product), cell(line.sku), cell(String(line.quantity), true), cell(line.price, true), cell(line.total, true));
      field("lines").append(tr);
    }
    main.querySelector("#reorder").addEventListener("click", reorder);
  }

  async function reorder() {
    const button = main.querySelector("#reorder");
    const outcome = main.querySelector("#outcome");
    button.disabled = true;
    outcome.textContent = "Asking…";
    try {
      const result = await app.callServerTool({ name: "reorder", arguments: { order_id: order.id } });
      const again = result.structuredContent && result.structuredContent.reordered;
      outcome.textContent = again ? `Ordered again as #${again.id}.` : "Not ordered again.";
      outcome.dataset.reordered = again ? String(again.id) : "";
    } catch (error) {
      outcome.textContent = `Could not order again: ${error.message || error}`;
    } finally {
      button.disabled = false;
    }
  }

  app.ontoolresult = (result) => {
    if (result.isError || !result.structuredContent) {
      main.textContent = (result.content || []).map((c) => c.text || "").join(" ");
      return;
    }
    show(result.structuredContent);
  };
  app.connect();
})();
