## tcu_hw top on ZCU104 (ZU7EV): TCU clock 100 MHz from PL0, AXI data width 128
## (zcu104_uram: use --mem-impl uram to put local memory and accumulators in UltraRAM).
## m_axi_dram0 -> S_AXI_HP0_FPD, m_axi_dram1 -> S_AXI_HP1_FPD,
## AXI DMA M_AXIS_MM2S -> instruction (DMA M_AXI_MM2S -> S_AXI_HP2_FPD), reset <- peripheral_aresetn.
create_clock -name tcu_clock -period 10.000 [get_ports clock]
set_false_path -from [get_ports reset]
