## tcu_hw top on Ultra96-V2 (ZU3EG): TCU clock 100 MHz from PL0, AXI data width 128.
## m_axi_dram0 -> S_AXI_HP1_FPD, m_axi_dram1 -> S_AXI_HP2_FPD,
## AXI DMA M_AXIS_MM2S -> instruction (DMA M_AXI_MM2S -> S_AXI_HP3_FPD), reset <- peripheral_aresetn.
create_clock -name tcu_clock -period 10.000 [get_ports clock]
set_false_path -from [get_ports reset]
